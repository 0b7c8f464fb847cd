package darwin

// systemRead are the macOS trees a compiler, an interpreter or a package
// manager reads: the base system, the dyld shared cache and cryptexes, the
// developer tools, Homebrew and MacPorts, configuration under /private/etc
// and the timezone database. /Library is limited to what tools read, so the
// system keychains and other users' preferences stay out.
var systemRead = []string{
	"/Applications/Xcode.app/Contents/Developer",
	"/Library/Apple",
	"/Library/Developer/CommandLineTools",
	"/Library/Frameworks",
	"/Library/Java",
	"/System",
	"/bin",
	"/opt/homebrew",
	"/opt/local",
	"/private/etc",
	"/private/var/db/timezone",
	"/private/var/select",
	"/sbin",
	"/usr",
}

// systemMasks are the places inside the readable system trees that hold
// user data rather than tools: /System/Volumes/Data is the data volume
// itself, where every home and project has a second spelling
// (/System/Volumes/Data/Users/...) that the rules on /Users would not
// match; the package managers' var trees hold local databases and their
// dumps.
var systemMasks = []string{
	"/System/Volumes/Data",
	"/opt/homebrew/var",
	"/opt/local/var",
	"/usr/local/var",
}

// systemFiles are the symlinks at the root that point into /private, read
// as links, and the root directory itself.
var systemFiles = []string{
	"/",
	"/etc",
	"/tmp",
	"/var",
}

// devices are the character devices every program may use.
var devices = []string{
	"/dev/dtracehelper",
	"/dev/null",
	"/dev/random",
	"/dev/tty",
	"/dev/urandom",
	"/dev/zero",
}

// machServices is the short list of launchd services agents and toolchains
// need: user and group lookup, logging, notifications (timezone changes),
// the per-user temp and cache dirs, and certificate trust evaluation, which
// Go and Security.framework clients use for TLS to the proxy.
var machServices = []string{
	"com.apple.bsd.dirhelper",
	"com.apple.logd",
	"com.apple.system.logger",
	"com.apple.system.notification_center",
	"com.apple.system.opendirectoryd.libinfo",
	"com.apple.system.opendirectoryd.membership",
	"com.apple.trustd.agent",
}

// sysctls a runtime reads about the machine; a trailing "*" makes a prefix.
// kern.proc.* is left out: it describes other processes.
var sysctls = []string{
	"hw.activecpu",
	"hw.byteorder",
	"hw.cachelinesize_compat",
	"hw.cpufamily",
	"hw.cputype",
	"hw.logicalcpu",
	"hw.logicalcpu_max",
	"hw.machine",
	"hw.memsize",
	"hw.model",
	"hw.ncpu",
	"hw.nperflevels",
	"hw.optional.*",
	"hw.pagesize",
	"hw.pagesize_compat",
	"hw.perflevel*",
	"hw.physicalcpu",
	"hw.physicalcpu_max",
	"kern.argmax",
	"kern.hostname",
	"kern.maxfilesperproc",
	"kern.maxproc",
	"kern.osproductversion",
	"kern.osrelease",
	"kern.ostype",
	"kern.osversion",
	"kern.secure_kernel",
	"kern.usrstack64",
	"kern.version",
	"machdep.cpu.*",
	"sysctl.proc_cputype",
	"vm.loadavg",
}

// homeStartup are the home paths macOS itself, or an app the user opens,
// runs or obeys outside the jail: login items and agents, user defaults
// (which name login scripts and shells of terminals), services and
// scripts, and VS Code's user settings (tasks, terminal environment). They
// stay read-only, beside the startup files every platform holds, wherever a
// policy makes them writable.
var homeStartup = []string{
	"Library/LaunchAgents",
	"Library/Preferences",
	"Library/Services",
	"Library/Scripts",
	"Library/Application Support/Code/User",
	"Library/Application Support/com.apple.backgroundtaskmanagementagent",
}
