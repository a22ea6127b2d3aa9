//go:build !unix

package dirlock

import "strings"

func isLockBusy(err error) bool { return strings.Contains(err.Error(), "lock") }

func isSelfHeld(err error) bool {
	return strings.Contains(err.Error(), "lock held by current process")
}

func holder(string) int { return 0 }
