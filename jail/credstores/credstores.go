// Package credstores lists where credentials live on a Linux machine: the
// stores in a home directory, which every jail masks in every mode, and
// the root-only secrets under /etc, which matter when jail runs as root.
// The planner masks exactly these and learning never proposes them, so
// both read this one list.
package credstores

import "strings"

// Home are credential stores relative to the home directory. An entry
// ending in "/" is a directory, masked whole with everything below it.
//
// Agents' own sign-in files (~/.claude/.credentials.json and the like)
// are not here: an agent needs its sign-in to work at all.
var Home = []string{
	// Keys, tokens and cloud credentials.
	".ssh/", ".gnupg/", ".aws/", ".azure/", ".config/gcloud/", ".kube/", ".docker/", ".minikube/",
	".terraform.d/", ".terraformrc", ".vault-token", ".oci/", ".config/doctl/", ".config/hcloud/",
	".config/scw/", ".config/linode-cli", ".config/rclone/", ".s3cfg", ".boto", ".config/helm/",
	".config/sops/", ".config/age/",
	// Forges and package registries.
	".netrc", ".git-credentials", ".config/git/credentials", ".config/gh/", ".config/glab-cli/", ".config/hub",
	".npmrc", ".yarnrc.yml", ".pypirc", ".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials",
	".config/composer/auth.json", ".composer/auth.json", ".m2/settings-security.xml", ".gradle/gradle.properties",
	// Databases.
	".pgpass", ".my.cnf", ".mylogin.cnf",
	// Password stores and keyrings.
	".password-store/", ".local/share/keyrings/", ".gnome2/keyrings/", ".local/share/kwalletd/",
	".config/op/", ".config/Bitwarden CLI/", ".local/share/keepassxc/",
	// Browser and mail profiles: cookies, saved passwords, mail.
	".mozilla/", ".thunderbird/", ".config/google-chrome/", ".config/chromium/", ".config/BraveSoftware/",
	".config/microsoft-edge/", ".config/vivaldi/", ".config/opera/", ".local/share/evolution/",
	".config/evolution/", ".mutt/", ".muttrc", ".msmtprc", ".mbsyncrc", ".fetchmailrc", ".authinfo", ".authinfo.gpg",
	// Wallets.
	".bitcoin/", ".electrum/", ".ethereum/keystore/", ".config/solana/",
	// Shell and REPL histories: pasted tokens end up there.
	".bash_history", ".zsh_history", ".histfile", ".python_history", ".psql_history", ".mysql_history",
	".sqlite_history", ".node_repl_history", ".local/share/fish/fish_history",
	// jail's own CA key and decision log.
	".config/jail/ca/", ".local/state/jail/",
}

// Bulk are the stores of Home that hold tens of thousands of files
// (browser and mail profiles, a wallet's chain, caches of cloud tools):
// they are masked whole, but their files are not searched for other names
// (hard links) in the trees the jail shows, which would cost a walk of
// them at every start. Such a link is made by hand; a jailed command,
// which cannot see these files, cannot make one.
var Bulk = []string{
	".mozilla/", ".thunderbird/", ".config/google-chrome/", ".config/chromium/", ".config/BraveSoftware/",
	".config/microsoft-edge/", ".config/vivaldi/", ".config/opera/", ".local/share/evolution/", ".config/evolution/",
	".bitcoin/", ".minikube/", ".terraform.d/",
}

// System are the secrets outside any home that only root can read: when
// jail runs as root they are masked; for other users they are unreadable
// already and cost nothing. Entries may hold glob characters.
var System = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/security/opasswd",
	"/etc/sudoers", "/etc/sudoers.d",
	"/etc/ssh/ssh_host_*key", "/etc/ssl/private", "/etc/pki/tls/private", "/etc/letsencrypt",
	"/etc/krb5.keytab", "/etc/wireguard", "/etc/NetworkManager/system-connections", "/etc/netplan",
	"/etc/wpa_supplicant", "/etc/openvpn", "/etc/ipsec.secrets", "/etc/ipsec.d/private",
	"/etc/ppp/chap-secrets", "/etc/ppp/pap-secrets", "/etc/kubernetes", "/etc/rancher",
	"/etc/ceph", "/etc/libvirt/secrets", "/etc/mysql/debian.cnf", "/etc/postfix/sasl_passwd",
	"/etc/exim4/passwd.client", "/etc/ldap.secret", "/etc/crypttab",
}

// IsHomeStore reports whether rel, a slash-separated path relative to the
// home, is a credential store or lies inside one.
func IsHomeStore(rel string) bool {
	for _, s := range Home {
		if d, ok := strings.CutSuffix(s, "/"); ok {
			if rel == d || strings.HasPrefix(rel, s) {
				return true
			}
		} else if rel == s {
			return true
		}
	}
	return false
}
