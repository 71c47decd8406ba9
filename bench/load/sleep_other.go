//go:build !linux

package load

import "time"

func setTimerSlack() {}

func sleep(d time.Duration) { time.Sleep(d) }
