package probe

import (
	"context"
	"net"

	"github.com/slowstart/slowstart/internal/netnsexec"
)

// dialIn dials address with dialer from inside the namespace at path.
func dialIn(ctx context.Context, path string, dialer *net.Dialer, network, address string) (net.Conn, error) {
	var conn net.Conn
	err := netnsexec.Run(path, func() error {
		var err error
		conn, err = dialer.DialContext(ctx, network, address)
		return err
	})
	return conn, err
}
