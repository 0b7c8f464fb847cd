package linux

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jailsh/jail/jail"
	"golang.org/x/sys/unix"
)

// A sign-in made inside the jail (an agent's /login: an authorization
// code or a device code exchanged at the provider's token endpoint) gets
// its tokens inside as placeholders, like every other token, and works
// for the session. Whether the host keeps the real tokens for later runs
// is the person's call, asked on the terminal after the command ends:
// a jailed command could exchange a code of its own account, and a host
// signed in as someone else sends them every prompt.

// signInAnswerWait bounds how long the question waits for an answer.
const signInAnswerWait = 2 * time.Minute

// login keeps the last sign-in answer, with the real tokens, until the
// command ends. An answer without a refresh token is no sign-in but a
// token exchanged for another (Codex trades its new id token for an API
// key right after signing in): kept, it would replace the sign-in's
// tokens in the host file.
func (st *signInState) login(answer map[string]any) error {
	if v, _ := answer["refresh_token"].(string); v == "" {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.pending = answer
	st.logins++
	return nil
}

// keepSignIns asks, for each sign-in made inside, whether to keep it in
// the host's sign-in file, and saves it when the answer is yes. Without a
// terminal nothing is kept, and it says so; nor with several sign-ins
// made (a jailed command's own may follow the person's).
func keepSignIns(states []*signInState, stderr io.Writer) {
	for _, st := range states {
		st.mu.Lock()
		answer, logins := st.pending, st.logins
		st.pending = nil
		st.mu.Unlock()
		if answer == nil {
			continue
		}
		host := jail.Shown(st.file.Host)
		if logins > 1 {
			fmt.Fprintf(stderr, "jail: %d sign-ins were made inside the jail; none is kept, since which is yours cannot be told, and %s is as it was (sign in outside jail)\n", logins, host)
			continue
		}
		who := signInAccount(answer)
		if st.file.Missing && !st.file.Keep {
			fmt.Fprintf(stderr, "jail: a sign-in made inside the jail (%s) was used for this run only; this jail holds %s's name, so it cannot keep one there (sign in outside jail)\n", jail.Escaped(who), host)
			continue
		}
		if !onTerminal() {
			fmt.Fprintf(stderr, "jail: a sign-in made inside the jail (%s) was used for this run only; %s is as it was (keeping one needs a terminal to confirm it, or sign in outside jail)\n", jail.Escaped(who), host)
			continue
		}
		// What was typed before the question (to the jailed command, which
		// left it unread) is no answer to it.
		unix.IoctlSetInt(0, unix.TCFLSH, unix.TCIFLUSH)
		fmt.Fprintf(stderr, "jail: a sign-in was made inside the jail, for %s. Keep it in %s, for later runs in and outside jail? [y/N] ", jail.Escaped(who), host)
		if !readYes(signInAnswerWait) {
			fmt.Fprintf(stderr, "jail: not kept; %s is as it was\n", host)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(st.file.Host), 0o700); err != nil {
			fmt.Fprintf(stderr, "jail: keeping the sign-in: %v\n", err)
			continue
		}
		if err := st.save(answer); err != nil {
			fmt.Fprintf(stderr, "jail: keeping the sign-in: %v\n", err)
			continue
		}
		fmt.Fprintf(stderr, "jail: kept in %s\n", host)
	}
}

// signInAccount is the account a token answer names (its e-mail address
// where the provider gives one), for the question.
func signInAccount(answer map[string]any) string {
	var found string
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		m, ok := v.(map[string]any)
		if !ok || depth > 3 || found != "" {
			return
		}
		for _, k := range []string{"email_address", "email"} {
			if s, ok := m[k].(string); ok && s != "" {
				found = s
				return
			}
		}
		for _, sub := range m {
			walk(sub, depth+1)
		}
	}
	walk(answer, 0)
	if found == "" {
		return "an account the provider did not name"
	}
	return "the account " + found
}

// onTerminal reports whether jail's stdin and stderr are a terminal.
func onTerminal() bool {
	for _, fd := range []int{0, 2} {
		if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err != nil {
			return false
		}
	}
	return true
}

// readYes reads one line from stdin within d and reports whether it says
// yes.
func readYes(d time.Duration) bool {
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		got <- strings.ToLower(strings.TrimSpace(line))
	}()
	select {
	case a := <-got:
		return a == "y" || a == "yes"
	case <-time.After(d):
		return false
	}
}
