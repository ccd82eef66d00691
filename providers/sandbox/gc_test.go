package sandbox

import (
	"runtime/debug"
	"testing"
)

func TestTuneGCRaisesGOGCUnlessTheUserSetIt(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)

	t.Setenv("GOGC", "")
	TuneGC()
	if got := debug.SetGCPercent(100); got != serveGCPercent {
		t.Errorf("without GOGC: GC percent %d, want %d", got, serveGCPercent)
	}
	t.Setenv("GOGC", "150")
	TuneGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: GC percent changed to %d", got)
	}
}
