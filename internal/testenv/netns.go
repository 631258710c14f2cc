package testenv

import (
	"fmt"
	"net"
	"strings"
)

// ConfinedNetworkHint says how to run a program so that RequireConfinedNetwork
// holds.
const ConfinedNetworkHint = "run it through hack/netns-exec.sh, as make test does (go test -exec \"$PWD/hack/netns-exec.sh\" ./...)"

// RequireConfinedNetwork returns an error unless this process runs in a
// network namespace whose only interface is loopback (names starting with
// "ferry" are allowed too: the veth ends a test environment adds itself).
//
// Every test cluster starts only there. A kube-apiserver calls admission
// webhooks and aggregated APIs at their Service's ClusterIP; in the machine's
// main namespace such a call would leave the machine by its default route,
// while in a namespace with nothing but lo it fails at once.
func RequireConfinedNetwork() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("testenv: listing network interfaces: %w", err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 || strings.HasPrefix(i.Name, "ferry") {
			continue
		}
		return fmt.Errorf("testenv: this process can reach the network through interface %s; "+
			"test clusters run only in a network namespace of their own with nothing but loopback: %s", i.Name, ConfinedNetworkHint)
	}
	return nil
}
