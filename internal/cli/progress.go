package cli

import (
	"io"
	"os"
	"sync"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

// progress shows one mpb bar on stderr when stderr is a terminal, and
// nothing otherwise.
type progress struct {
	p   *mpb.Progress
	bar *mpb.Bar
	mu  sync.Mutex
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newProgress(w io.Writer, name string) *progress {
	if !isTerminal(w) {
		return &progress{}
	}
	p := mpb.New(mpb.WithOutput(w), mpb.WithAutoRefresh())
	bar := p.AddBar(0,
		mpb.PrependDecorators(decor.Name(name, decor.WC{C: decor.DindentRight | decor.DextraSpace}), decor.CountersNoUnit("%d / %d")),
		mpb.AppendDecorators(decor.Percentage(), decor.Name(" "), decor.AverageSpeed(0, "%.0f items/s")),
	)
	return &progress{p: p, bar: bar}
}

// update sets done of total items.
func (pr *progress) update(done, total int) {
	if pr.bar == nil {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.bar.SetTotal(int64(total), false)
	pr.bar.SetCurrent(int64(done))
}

// stop completes the bar and waits for the last render.
func (pr *progress) stop() {
	if pr.bar == nil {
		return
	}
	pr.bar.SetTotal(-1, true)
	pr.p.Wait()
}
