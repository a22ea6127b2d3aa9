// Package accept keeps a server's accept loops alive through the errors a
// busy or attacked server meets, and sizes what they may hold by the
// process's file-descriptor limit.
//
// Classify sorts an accept error: a connection that failed before it was
// accepted (ECONNABORTED, EPROTO, ...) is retried at once, a resource that
// ran out (EMFILE, ENFILE, ENOBUFS, ENOMEM) after a growing pause, and
// anything else is fatal: the listening socket is unusable and the server
// must stop or say it is unhealthy rather than serve a dead socket. A Loop
// holds one accept loop's pause, counters and log (one line when a burst
// of errors starts, one when it ends). NewListener wraps a net.Listener
// with a Loop and a cap on the connections open at once (SetPerSource: and
// on those of one client address); a raw accept4 loop (non-blocking, under
// epoll) uses a Loop directly.
//
// # A raw accept loop
//
// A non-blocking accept4 loop under epoll calls Failed for every error but
// EAGAIN, and must leave the listening socket out of its wait for the
// pause Failed returns: a level-triggered epoll reports the socket
// readable at once while the connection that could not be accepted waits
// in the backlog.
//
//	loop := accept.NewLoop(accept.Options{Name: "tcp " + addr, Log: log})
//	for {
//		fd, _, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
//		switch {
//		case err == unix.EAGAIN:
//			return // wait for EPOLLIN
//		case err != nil:
//			pause, err := loop.Failed(err)
//			if err != nil {
//				return err // fatal: stop serving, say why
//			}
//			if pause > 0 {
//				return // not watching lfd until pause has passed
//			}
//			continue
//		}
//		loop.Accepted()
//		if open == maxConns {
//			unix.Close(fd)
//			loop.Refused()
//			continue
//		}
//		...
//	}
//
// FileLimit reads RLIMIT_NOFILE, whose soft limit Go's runtime raises to
// one below the hard one at start.
//
// # Concurrency
//
// A Loop belongs to its accept loop's goroutine, except Counts, which is
// safe from any goroutine. A Listener is safe for concurrent use, as
// net.Listener is.
package accept
