package inside

import (
	"errors"
	"net"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// takeHandedOff reads what handOff sent on c, as the proxy does: the
// line naming the original destination and the client's socket.
func takeHandedOff(c *net.UnixConn) (string, net.Conn, error) {
	buf, oob := make([]byte, 128), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return "", nil, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return "", nil, errors.New("no descriptor came with the line")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return "", nil, errors.New("not one descriptor")
	}
	f := os.NewFile(uintptr(fds[0]), "handed")
	defer f.Close()
	conn, err := net.FileConn(f)
	return strings.Clone(string(buf[:n])), conn, err
}
