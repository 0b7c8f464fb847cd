package remote

import "syscall"

// oNoFollow makes open fail on a symlink.
const oNoFollow = syscall.O_NOFOLLOW
