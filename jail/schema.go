package jail

import _ "embed"

// Schema is the JSON Schema (draft 2020-12) for jail.json and every other
// config layer (user config, --settings files, profiles), printed by
// `jail schema` so that editors can complete and check config files. A file
// may name it with a "$schema" key, which ParseConfig accepts and ignores.
// TestSchema* keep it in sync with Config and ParseConfig.
//
//go:embed jail.schema.json
var Schema []byte
