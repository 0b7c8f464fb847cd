package inside

import (
	"net"

	"golang.org/x/sys/unix"
)

// handOff sends the accepted client socket c to the proxy over up, with
// the line that names its original destination, and closes the bridge's
// copies of both: the proxy then reads and writes the client's socket
// itself, and no byte of the connection passes through the bridge. It
// reports false, having sent nothing, when up is not a unix socket.
func handOff(c *net.TCPConn, up net.Conn, line []byte) bool {
	uc, ok := up.(*net.UnixConn)
	if !ok {
		return false
	}
	defer c.Close()
	defer up.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		return true
	}
	rc.Control(func(fd uintptr) {
		uc.WriteMsgUnix(line, unix.UnixRights(int(fd)), nil)
	})
	return true
}
