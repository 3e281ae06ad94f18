package chaos

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// The packet delayer of a latency fault.
//
// This machine's kernel has no netem qdisc (CONFIG_NET_SCH_NETEM is not
// set, nor sch_prio), so `tc qdisc ... netem delay` fails. The harness
// delays packets with netfilter instead: an iptables rule in the faulty
// host's namespace sends the packets to the chosen peers to an NFQUEUE,
// and this role, run in the same namespace, holds each one for the delay
// before it tells the kernel to let it go (NF_ACCEPT). The packets are the
// real TCP segments, delayed in the kernel's queue: TCP sees the added
// round-trip time as it would on a slow link. The rule is added with
// --queue-bypass, so packets flow undelayed whenever no delayer listens.
//
// It speaks nfnetlink_queue directly (linux/netfilter/nfnetlink_queue.h)
// over a NETLINK_NETFILTER socket: bind the queue, ask for metadata only,
// read packet ids, send verdicts.

const (
	nfnlSubsysQueue = 3
	nfqnlMsgPacket  = 0
	nfqnlMsgVerdict = 1
	nfqnlMsgConfig  = 2

	nfqaCfgCmd      = 1
	nfqaCfgParams   = 2
	nfqaCfgQueueMax = 3
	nfqaPacketHdr   = 1
	nfqaVerdictHdr  = 2

	nfqnlCfgCmdBind = 1
	nfqnlCopyMeta   = 1
	nfAccept        = 1

	netlinkNetfilter = 12 // NETLINK_NETFILTER
)

// runDelay holds every packet of NFQUEUE queue for delay, then accepts it,
// until ctx ends; then it accepts what it holds at once.
func runDelay(ctx context.Context, queue, delay string) error {
	q, err := strconv.ParseUint(queue, 10, 16)
	if err != nil {
		return fmt.Errorf("queue %q: %w", queue, err)
	}
	d, err := time.ParseDuration(delay)
	if err != nil {
		return fmt.Errorf("delay %q: %w", delay, err)
	}
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, netlinkNetfilter)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer syscall.Close(fd)
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 8<<20)
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink bind: %w", err)
	}
	qn := uint16(q)
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, syscall.AF_INET} // command, pad, pf (big endian)
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params[0:4], 0xffff) // copy range (metadata only anyway)
	params[4] = nfqnlCopyMeta
	maxlen := binary.BigEndian.AppendUint32(nil, 16384)
	for i, m := range [][]byte{
		nfqMsg(nfqnlMsgConfig, qn, 1, attr(nfqaCfgCmd, cmd)),
		nfqMsg(nfqnlMsgConfig, qn, 2, attr(nfqaCfgParams, params)),
		nfqMsg(nfqnlMsgConfig, qn, 3, attr(nfqaCfgQueueMax, maxlen)),
	} {
		if err := nlRequest(fd, m, uint32(i+1)); err != nil {
			return fmt.Errorf("bind queue %d: %w", qn, err)
		}
	}
	fmt.Fprintf(os.Stderr, "nfqdelay: queue %d bound, delay %v\n", qn, d)

	type held struct {
		id uint32
		at time.Time
	}
	pending := make(chan held, 1<<16)
	readErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, _, err := syscall.Recvfrom(fd, buf, 0)
			if err != nil {
				if errors.Is(err, syscall.EINTR) {
					continue
				}
				if errors.Is(err, syscall.ENOBUFS) {
					continue // the kernel dropped what did not fit; go on
				}
				readErr <- err
				return
			}
			now := time.Now()
			for _, id := range packetIDs(buf[:n]) {
				pending <- held{id, now}
			}
		}
	}()
	var seq uint32 = 100
	accept := func(id uint32) error {
		v := make([]byte, 8)
		binary.BigEndian.PutUint32(v[0:4], nfAccept)
		binary.BigEndian.PutUint32(v[4:8], id)
		seq++
		return syscall.Sendto(fd, nfqMsg(nfqnlMsgVerdict, qn, seq, attr(nfqaVerdictHdr, v)), 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK})
	}
	for {
		select {
		case <-ctx.Done():
			// Let everything held go now: the fault is over.
			for {
				select {
				case p := <-pending:
					_ = accept(p.id)
				default:
					return nil
				}
			}
		case err := <-readErr:
			return fmt.Errorf("netlink read: %w", err)
		case p := <-pending:
			if w := time.Until(p.at.Add(d)); w > 0 {
				select {
				case <-time.After(w):
				case <-ctx.Done():
				}
			}
			if err := accept(p.id); err != nil {
				return fmt.Errorf("verdict: %w", err)
			}
		}
	}
}

// nfqMsg is one nfnetlink_queue message of type t for queue q.
func nfqMsg(t uint16, q uint16, seq uint32, attrs ...[]byte) []byte {
	body := []byte{syscall.AF_UNSPEC, 0, byte(q >> 8), byte(q)} // nfgenmsg: family, version, res_id (big endian)
	for _, a := range attrs {
		body = append(body, a...)
	}
	flags := uint16(syscall.NLM_F_REQUEST)
	if t == nfqnlMsgConfig {
		flags |= syscall.NLM_F_ACK
	}
	hdr := make([]byte, 16)
	binary.NativeEndian.PutUint32(hdr[0:4], uint32(16+len(body)))
	binary.NativeEndian.PutUint16(hdr[4:6], nfnlSubsysQueue<<8|t)
	binary.NativeEndian.PutUint16(hdr[6:8], flags)
	binary.NativeEndian.PutUint32(hdr[8:12], seq)
	return append(hdr, body...)
}

// attr is one netlink attribute, padded to 4 bytes.
func attr(t uint16, v []byte) []byte {
	a := make([]byte, 4, 4+len(v)+3)
	binary.NativeEndian.PutUint16(a[0:2], uint16(4+len(v)))
	binary.NativeEndian.PutUint16(a[2:4], t)
	a = append(a, v...)
	for len(a)%4 != 0 {
		a = append(a, 0)
	}
	return a
}

// nlRequest sends m and waits for its acknowledgement.
func nlRequest(fd int, m []byte, seq uint32) error {
	binary.NativeEndian.PutUint32(m[8:12], seq)
	if err := syscall.Sendto(fd, m, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, msg := range msgs {
			if msg.Header.Type == syscall.NLMSG_ERROR && msg.Header.Seq == seq && len(msg.Data) >= 4 {
				if code := int32(binary.NativeEndian.Uint32(msg.Data[0:4])); code != 0 {
					return syscall.Errno(-code)
				}
				return nil
			}
		}
	}
}

// packetIDs returns the packet ids of the queued-packet messages in b.
func packetIDs(b []byte) []uint32 {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return nil
	}
	var ids []uint32
	for _, m := range msgs {
		if m.Header.Type != nfnlSubsysQueue<<8|nfqnlMsgPacket || len(m.Data) < 4 {
			continue
		}
		a := m.Data[4:] // after nfgenmsg
		for len(a) >= 4 {
			l := int(binary.NativeEndian.Uint16(a[0:2]))
			t := binary.NativeEndian.Uint16(a[2:4]) &^ 0xc000 // nested / byte-order flags
			if l < 4 || l > len(a) {
				break
			}
			if t == nfqaPacketHdr && l >= 8 {
				ids = append(ids, binary.BigEndian.Uint32(a[4:8]))
			}
			a = a[min((l+3)&^3, len(a)):]
		}
	}
	return ids
}
