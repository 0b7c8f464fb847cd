package tests

import (
	"strings"
	"testing"
)

// The jail's bridge hands every captured TCP socket to the host proxy
// over the capture socket, and every connection to the proxy ports
// (3128, 1080) over the HTTP and SOCKS sockets, which every jailed
// process can reach. A jailed process that sends its own descriptor
// there instead (a project file or a pipe holding a request for an
// allowed host, or a real TCP socket sent with a request of its own
// beside it) must get nothing served: the request never reaches the
// upstream server, the answer is never written into the file, and the
// refusal is logged.
const handFDPy = `
import os, socket, struct, sys
host = b"plain.allowed.test"
def request(path, absolute):
    target = b"http://" + host + path if absolute else path
    return b"GET " + target + b" HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n"
socks_hello = b"\x05\x01\x00\x05\x01\x00\x03" + bytes([len(host)]) + host + struct.pack(">H", 80)
sockets = {
    # name: (the bytes the bridge sends, what the proxy would read)
    "capture": (b"192.0.2.12:80\n", request(b"/attack-handed-capture", False)),
    "http": (b"\x00", request(b"/attack-handed-http", True)),
    "socks": (b"\x00", socks_hello + request(b"/attack-handed-socks", False)),
}
def hand(name, sock, data, fd):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("/run/jail/net/%s.sock" % sock)
    socket.send_fds(s, [data], [fd])
    s.settimeout(5)
    try:
        got = s.recv(200)
        print("@@%s-%s\t%r" % (sock, name, got))
    except ConnectionResetError:
        print("@@%s-%s\treset" % (sock, name))
    except Exception as e:
        print("@@%s-%s\terror %s" % (sock, name, e))
    s.close()
for sock, (mark, req) in sockets.items():
    with open("request-%s.txt" % sock, "wb") as f:
        f.write(req)
    hand("file", sock, mark, os.open("request-%s.txt" % sock, os.O_RDWR))
    r, w = os.pipe()
    os.write(w, req)
    hand("pipe", sock, mark, r)
    if sock == "capture":
        continue
    # A connected TCP socket, sent with the request instead of the mark.
    l = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(l.getsockname())
    a, _ = l.accept()
    c.sendall(req)
    hand("tcp", sock, req, a.fileno())
    c.settimeout(0.5)
    try:
        print("@@%s-tcp-client\t%r" % (sock, c.recv(200)))
    except Exception as e:
        print("@@%s-tcp-client\tnothing" % sock)
`

func TestCaptureRefusesHandedDescriptors(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		s.WriteFile(s.Project+"/handfd.py", handFDPy, 0o644)
		r := s.Sh(probeSh + `
			probe http-control http://plain.allowed.test/handed-http-control
			probe socks-control --proxy socks5h://127.0.0.1:1080 http://plain.allowed.test/handed-socks-control` + unsetProxy + `
			echo session=$JAIL_SESSION
			python3 handfd.py
			probe control --resolve plain.allowed.test:80:192.0.2.12 http://plain.allowed.test/handed-control`)
		ps := probes(t, r)
		wantOK(t, getProbe(t, ps, r, "control"), "/handed-control")
		wantOK(t, getProbe(t, ps, r, "http-control"), "/handed-http-control")
		wantOK(t, getProbe(t, ps, r, "socks-control"), "/handed-socks-control")
		results := map[string]string{}
		for _, l := range lines(r.Stdout) {
			if k, v, ok := strings.Cut(strings.TrimPrefix(l, "@@"), "\t"); ok && strings.HasPrefix(l, "@@") {
				results[k] = v
			}
		}
		for _, sock := range []string{"capture", "http", "socks"} {
			for _, name := range []string{"file", "pipe"} {
				if got := results[sock+"-"+name]; got != "b''" {
					t.Errorf("%s handed to the %s socket: want the connection closed without a byte; got %q\n%s", name, sock, got, r)
				}
			}
			if got := hostFile(t, s.Project+"/request-"+sock+".txt"); !strings.Contains(got, "/attack-handed-"+sock+" ") || strings.Contains(got, "HTTP/1.1 200") {
				t.Errorf("the file handed to the %s socket changed: %q", sock, got)
			}
			if sock == "capture" {
				continue
			}
			if got := results[sock+"-tcp"]; got != "b''" && got != "reset" {
				t.Errorf("a TCP socket handed to the %s socket with a request: want the connection closed without a byte; got %q\n%s", sock, got, r)
			}
			if got := results[sock+"-tcp-client"]; got != "nothing" && got != "b''" {
				t.Errorf("the client of the TCP socket handed to the %s socket with a request was answered: %q\n%s", sock, got, r)
			}
		}
		if got := n.Plain.SawPrefix("/attack"); len(got) > 0 {
			t.Errorf("a request read from a handed descriptor reached the upstream server: %v", got)
		}
		ds := decisions(t, s, sessionOf(t, r))
		refused := map[string]int{}
		for _, d := range ds {
			if d.Verdict != "deny" {
				continue
			}
			switch {
			case d.Method == "CAPTURE" && strings.Contains(d.Reason, "the socket handed over: not a socket"):
				refused["capture"]++
			case strings.HasPrefix(d.Reason, "invalid proxy connection: the socket handed over: not a socket"):
				refused[d.Scheme]++
			case strings.HasPrefix(d.Reason, "invalid proxy connection: the socket handed over: sent with other bytes"):
				refused[d.Scheme+" tcp"]++
			}
		}
		want := map[string]int{"capture": 2, "http": 2, "socks5": 2, "http tcp": 1, "socks5 tcp": 1}
		for k, v := range want {
			if refused[k] != v {
				t.Errorf("want %d refusals of descriptors handed to the %s socket logged; got %d:\n%s", v, k, refused[k], dumpDecisions(ds))
			}
		}
	})
}
