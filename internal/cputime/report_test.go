package cputime

import "testing"

type metrics map[string]float64

func (m metrics) ReportMetric(n float64, unit string) { m[unit] = n }

func TestReport(t *testing.T) {
	start := Used()
	for x := 0; Used() == start; x++ { // spend CPU until the clock moves
		_ = x
	}
	for _, tc := range []struct {
		name string
		n    int
		want bool
	}{{"per op", 4, true}, {"no ops", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics{}
			Report(m, start, tc.n)
			v, ok := m["cpu-ns/op"]
			if ok != tc.want || (ok && v <= 0) {
				t.Fatalf("Report(n=%d) = %v (reported %v), want reported %v and > 0", tc.n, v, ok, tc.want)
			}
		})
	}
}
