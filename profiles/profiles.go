// Package profiles holds jail's built-in profiles as embedded JSON.
package profiles

import "embed"

//go:embed *.json
var FS embed.FS
