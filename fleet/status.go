package fleet

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Standing is where a rollout of a module stands on the servers: how
// many run it confirmed, run it provisionally (reverting at a deadline
// unless a rollout confirms them), run something else, or could not be
// read.
type Standing struct {
	Confirmed, Provisional, Other, Unreadable int
}

// Stand counts the servers' states against mod.
func Stand(mod Module, states []ServerState) Standing {
	var s Standing
	for _, st := range states {
		switch {
		case st.Err != nil:
			s.Unreadable++
		case st.SHA256 != mod.SHA256:
			s.Other++
		case !st.Provisional.IsZero():
			s.Provisional++
		default:
			s.Confirmed++
		}
	}
	return s
}

// WriteStatus prints each server's state against mod and where the
// rollout stands.
func WriteStatus(w io.Writer, tenant string, mod Module, states []ServerState) Standing {
	fmt.Fprintf(w, "module %s (sha256 %.12s), tenant %s\n", mod.Reference, mod.SHA256, tenant)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SERVER\tVERSION\tRUNNING SHA256\tSTATE")
	for _, st := range states {
		ver, run, state := fmt.Sprint(st.Version), fmt.Sprintf("%.12s", st.SHA256), ""
		switch {
		case st.Err != nil:
			ver, run, state = "-", "-", "UNREADABLE: "+st.Err.Error()
		case st.SHA256 != mod.SHA256:
			state = "another module"
		case !st.Provisional.IsZero():
			state = fmt.Sprintf("the module, PROVISIONAL: reverts at %s (in %v) unless confirmed", st.Provisional.Local().Format("15:04:05"),
				max(0, time.Until(st.Provisional)).Round(time.Second))
		default:
			state = "the module, confirmed"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", st.Server, ver, run, state)
	}
	tw.Flush()
	s := Stand(mod, states)
	n := len(states)
	switch {
	case s.Confirmed == n:
		fmt.Fprintf(w, "rolled out: all %d server(s) run it, confirmed\n", n)
	case s.Confirmed+s.Provisional+s.Unreadable == 0:
		fmt.Fprintf(w, "not rolled out: none of the %d server(s) runs it\n", n)
	case s.Provisional > 0:
		fmt.Fprintf(w, "in progress, or interrupted: %d of %d server(s) run it confirmed, %d provisionally (they revert unless a rollout confirms them), %d another module, %d unreadable\n",
			s.Confirmed, n, s.Provisional, s.Other, s.Unreadable)
	default:
		fmt.Fprintf(w, "partly rolled out: %d of %d server(s) run it, confirmed; %d another module, %d unreadable (psp rollout again to finish: servers that run it are not swapped again)\n",
			s.Confirmed, n, s.Other, s.Unreadable)
	}
	return s
}
