package webfetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The SSRF guard: a model chooses the URLs, so web_fetch must never become
// a way into the runner's own network (the loopback services, the LAN, a
// cloud metadata endpoint). Names are checked where it matters, on the
// address actually dialed: every address a name resolves to is checked,
// then only checked addresses are dialed, and the dialer's Control hook
// checks the socket's address once more. DNS rebinding and redirects to
// internal hosts therefore fail too.

// refusedError is a request the guard will not make; retrying cannot help.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func refused(format string, args ...any) error {
	return &refusedError{msg: fmt.Sprintf(format, args...)}
}

// resolver is the part of *net.Resolver the guard uses; tests inject one.
type resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// guard decides which hosts and addresses may be reached.
type guard struct {
	// allow holds the allow_hosts entries: "host" or "host:port", lower
	// case, IPv6 literals without brackets unless a port is given.
	allow    map[string]bool
	resolver resolver
	dialer   net.Dialer
}

// dialTimeout bounds one TCP connect, so one dead address of several does
// not use up the call's whole timeout.
const dialTimeout = 10 * time.Second

func newGuard(allowHosts []string) (*guard, error) {
	g := &guard{allow: map[string]bool{}, resolver: net.DefaultResolver}
	for i, h := range allowHosts {
		key, err := allowKey(h)
		if err != nil {
			return nil, fmt.Errorf("allow_hosts[%d]: %w", i, err)
		}
		g.allow[key] = true
	}
	g.dialer = net.Dialer{Timeout: dialTimeout}
	return g, nil
}

// allowKey normalises one allow_hosts entry.
func allowKey(entry string) (string, error) {
	h := strings.ToLower(strings.TrimSpace(entry))
	if h == "" {
		return "", errors.New("is empty")
	}
	if strings.ContainsAny(h, "/?#@ \t") {
		return "", fmt.Errorf("%q is not a host name or host:port (no scheme, path or user)", entry)
	}
	if host, port, err := net.SplitHostPort(h); err == nil {
		if host == "" {
			return "", fmt.Errorf("%q has no host", entry)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q has an invalid port", entry)
		}
		return net.JoinHostPort(strings.TrimSuffix(host, "."), port), nil
	}
	h = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(h, "]"), "["), ".")
	if strings.Contains(h, ":") {
		if _, err := netip.ParseAddr(h); err != nil {
			return "", fmt.Errorf("%q is not a host name or host:port", entry)
		}
	}
	return h, nil
}

// allowed reports whether the host (as written in the URL) is allow-listed,
// alone or with this port.
func (g *guard) allowed(host, port string) bool {
	if len(g.allow) == 0 {
		return false
	}
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	return g.allow[h] || g.allow[net.JoinHostPort(h, port)]
}

// checkURL refuses what may not be fetched before anything is sent: other
// schemes, credentials in the URL, and literal internal addresses (the
// dialer would refuse those too, but this says why more plainly).
func (g *guard) checkURL(u *url.URL) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return refused("only http and https URLs can be fetched, not %s:", u.Scheme)
	case u.User != nil:
		return refused("URLs with a user name or password are not fetched")
	case u.Hostname() == "":
		return refused("the URL has no host")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return refused("the URL's port %q is not valid", u.Port())
	}
	if g.allowed(u.Hostname(), port) {
		return nil
	}
	if isLocalhostName(u.Hostname()) {
		return refused("%s is a loopback name, which web_fetch may not reach", u.Hostname())
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil {
		if why := blockedReason(a); why != "" {
			return refused("%s is a %s address, which web_fetch may not reach", u.Hostname(), why)
		}
	}
	return nil
}

// isLocalhostName reports the names that always mean this machine
// (RFC 6761), refused without asking DNS.
func isLocalhostName(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// dialContext is the transport's dialer: it resolves the host itself,
// refuses it if any address is internal (unless allow-listed), and dials
// only the addresses it checked.
func (g *guard) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("bad address %q: %w", addr, err)
	}
	portNum, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port in %q", addr)
	}
	allowed := g.allowed(host, port)
	if !allowed && isLocalhostName(host) {
		return nil, refused("%s is a loopback name, which web_fetch may not reach", host)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = g.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		if len(addrs) == 0 {
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
	}
	if !allowed {
		for _, a := range addrs {
			if why := blockedReason(a); why != "" {
				if a.WithZone("").String() == host {
					return nil, refused("%s is a %s address, which web_fetch may not reach", host, why)
				}
				return nil, refused("%s resolves to %s, a %s address, which web_fetch may not reach", host, a, why)
			}
		}
	}
	d := g.dialer
	d.Control = g.control(allowed)
	var firstErr error
	for _, a := range addrs {
		if (network == "tcp4" && !a.Unmap().Is4()) || (network == "tcp6" && a.Is4()) {
			continue
		}
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(portNum)).String())
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("no %s address for %s", network, host)
	}
	return nil, firstErr
}

// control checks the address of the socket about to connect: the last
// line of defence, whatever resolved the name.
func (g *guard) control(allowed bool) func(network, address string, _ syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		if allowed {
			return nil
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return refused("cannot check the address %q before connecting", address)
		}
		if why := blockedReason(ap.Addr()); why != "" {
			return refused("%s is a %s address, which web_fetch may not reach", ap.Addr(), why)
		}
		return nil
	}
}

// blockedPrefix is a range that is not the public internet.
type blockedPrefix struct {
	prefix netip.Prefix
	why    string
}

var blockedPrefixes = []blockedPrefix{
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network"`},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (shared)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking network"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible (deprecated)"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/32"), "Teredo tunnel"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
}

// Ranges that embed an IPv4 address, which is checked in turn.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	metadataV4 = netip.MustParseAddr("169.254.169.254")
	metadataV6 = netip.MustParseAddr("fd00:ec2::254")
)

// blockedReason says what kind of internal address a is, or "" for a
// public one. IPv4-mapped, NAT64 and 6to4 forms are judged by the IPv4
// address inside them.
func blockedReason(a netip.Addr) string {
	a = a.WithZone("")
	if a.Is4In6() {
		a = a.Unmap()
	}
	switch {
	case !a.IsValid():
		return "invalid"
	case a == metadataV4 || a == metadataV6:
		return "cloud metadata"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, b := range blockedPrefixes {
		if b.prefix.Contains(a) {
			return b.why
		}
	}
	if a.Is6() {
		b := a.As16()
		if nat64.Contains(a) {
			if why := blockedReason(netip.AddrFrom4([4]byte(b[12:16]))); why != "" {
				return "NAT64 form of a " + why
			}
		}
		if sixToFour.Contains(a) {
			if why := blockedReason(netip.AddrFrom4([4]byte(b[2:6]))); why != "" {
				return "6to4 form of a " + why
			}
		}
	}
	return ""
}
