package tests

import (
	"strings"
	"testing"
)

// The jail's bridge hands every captured TCP socket to the host proxy
// over the capture socket, which every jailed process can reach. A
// jailed process that sends its own descriptor there instead (a project
// file or a pipe holding a request for an allowed host) must get nothing
// served: the request never reaches the upstream server, the answer is
// never written into the file, and the refusal is logged.
const handFDPy = `
import os, socket, sys
req = b"GET /attack-handed HTTP/1.1\r\nHost: plain.allowed.test\r\nConnection: close\r\n\r\n"
def hand(name, fd):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("/run/jail/net/capture.sock")
    socket.send_fds(s, [b"192.0.2.12:80\n"], [fd])
    s.settimeout(5)
    try:
        got = s.recv(200)
        print("@@%s\t%r" % (name, got))
    except Exception as e:
        print("@@%s\terror %s" % (name, e))
with open("request.txt", "wb") as f:
    f.write(req)
hand("file", os.open("request.txt", os.O_RDWR))
r, w = os.pipe()
os.write(w, req)
hand("pipe", r)
`

func TestCaptureRefusesHandedDescriptors(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		s.WriteFile(s.Project+"/handfd.py", handFDPy, 0o644)
		r := s.Sh(probeSh + unsetProxy + `
			echo session=$JAIL_SESSION
			python3 handfd.py
			probe control --resolve plain.allowed.test:80:192.0.2.12 http://plain.allowed.test/handed-control`)
		wantOK(t, getProbe(t, probes(t, r), r, "control"), "/handed-control")
		for _, name := range []string{"file", "pipe"} {
			line := ""
			for _, l := range lines(r.Stdout) {
				if strings.HasPrefix(l, "@@"+name+"\t") {
					line = l
				}
			}
			if line != "@@"+name+"\tb''" {
				t.Errorf("%s handed to the capture socket: want the connection closed without a byte; got %q\n%s", name, line, r)
			}
		}
		if got := n.Plain.SawPrefix("/attack"); len(got) > 0 {
			t.Errorf("a request read from a handed descriptor reached the upstream server: %v", got)
		}
		if got := hostFile(t, s.Project+"/request.txt"); !strings.HasPrefix(got, "GET /attack-handed ") || strings.Contains(got, "HTTP/1.1 200") {
			t.Errorf("the file handed over changed: %q", got)
		}
		refused := 0
		for _, d := range decisions(t, s, sessionOf(t, r)) {
			if d.Method == "CAPTURE" && d.Verdict == "deny" && strings.Contains(d.Reason, "the socket handed over: not a socket") {
				refused++
			}
		}
		if refused != 2 {
			t.Errorf("want both descriptors logged as refused; %d are:\n%s", refused, dumpDecisions(decisions(t, s, sessionOf(t, r))))
		}
	})
}
