package cli

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/kubeferry/ferry/pkg/helperpod"
	"github.com/kubeferry/ferry/pkg/images"
	"github.com/kubeferry/ferry/pkg/volumes"
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

// imageProgress shows one mpb bar per image (bytes of blobs moved) on
// stderr when it is a terminal, and nothing otherwise.
type imageProgress struct {
	p    *mpb.Progress
	mu   sync.Mutex
	bars map[images.Task]*mpb.Bar
}

func newImageProgress(w io.Writer) *imageProgress {
	if !isTerminal(w) {
		return &imageProgress{}
	}
	return &imageProgress{p: mpb.New(mpb.WithOutput(w), mpb.WithAutoRefresh()), bars: map[images.Task]*mpb.Bar{}}
}

func (ip *imageProgress) bar(t images.Task) *mpb.Bar {
	b, ok := ip.bars[t]
	if !ok {
		b = ip.p.AddBar(0,
			mpb.PrependDecorators(decor.Name(t.Source, decor.WC{C: decor.DindentRight | decor.DextraSpace}), decor.Counters(decor.SizeB1024(0), "% .1f / % .1f")),
			mpb.AppendDecorators(decor.Percentage(), decor.Name(" "), decor.AverageSpeed(decor.SizeB1024(0), "% .1f")),
		)
		ip.bars[t] = b
	}
	return b
}

// update sets an image's bytes complete of total.
func (ip *imageProgress) update(t images.Task, complete, total int64) {
	if ip.p == nil {
		return
	}
	ip.mu.Lock()
	defer ip.mu.Unlock()
	b := ip.bar(t)
	b.SetTotal(total, false)
	b.SetCurrent(complete)
}

// done completes (or aborts, for a failure) an image's bar.
func (ip *imageProgress) done(r images.Result) {
	if ip.p == nil {
		return
	}
	ip.mu.Lock()
	defer ip.mu.Unlock()
	b := ip.bar(images.Task{Source: r.Source, Target: r.Target})
	if r.Outcome == images.Failed {
		b.Abort(false)
		return
	}
	b.SetTotal(-1, true)
}

// stop waits for the last render.
func (ip *imageProgress) stop() {
	if ip.p != nil {
		ip.p.Wait()
	}
}

// dataProgress shows bytes and files of volume data as they go, on a
// terminal only.
type dataProgress struct {
	bar *mpb.Bar
	p   *mpb.Progress
	// vols are the bars of each claim or volume a helper pod moves.
	vols map[string]*volumeBar
	mu   sync.Mutex
	t    struct {
		volumes, done int
		bytes, files  int64
	}
}

// dataBar adds a bar of volume data under pr's bar (nothing when pr shows
// nothing). Stop it before pr.
func (pr *progress) dataBar(name string) *dataProgress {
	if pr.p == nil {
		return &dataProgress{}
	}
	dp := &dataProgress{p: pr.p, vols: map[string]*volumeBar{}}
	dp.bar = pr.p.New(0, mpb.NopStyle(),
		mpb.PrependDecorators(decor.Name(name, decor.WC{C: decor.DindentRight | decor.DextraSpace})),
		mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
			dp.mu.Lock()
			defer dp.mu.Unlock()
			return fmt.Sprintf("%d/%d volumes, %d files, %s", dp.t.done, dp.t.volumes, dp.t.files, humanBytes(dp.t.bytes))
		}), decor.Name("  "), decor.AverageSpeed(decor.SizeB1024(0), "% .1f")),
	)
	return dp
}

// update takes the running totals of pkg/volumes.
func (dp *dataProgress) update(t volumes.Totals) {
	if dp.bar == nil {
		return
	}
	dp.mu.Lock()
	dp.t.volumes, dp.t.done, dp.t.bytes, dp.t.files = t.Volumes, t.VolumesDone, t.Bytes, t.Files
	dp.mu.Unlock()
	dp.bar.SetTotal(t.Bytes+1, false)
	dp.bar.SetCurrent(t.Bytes)
}

func (dp *dataProgress) stop() {
	if dp.bar == nil {
		return
	}
	dp.mu.Lock()
	for _, vb := range dp.vols {
		vb.bar.SetTotal(-1, true)
	}
	dp.mu.Unlock()
	dp.bar.SetTotal(-1, true)
}

// volumeBar is one claim's (or volume's) line: its bytes and files.
type volumeBar struct {
	bar          *mpb.Bar
	mu           sync.Mutex
	bytes, files int64
	done         bool
}

// volume shows the progress of one claim or volume (helperpod.Helpers.OnVolume):
// a line of its own, with its bytes and files, ended when done.
func (dp *dataProgress) volume(key string, p helperpod.Progress, done bool) {
	if dp.p == nil {
		return
	}
	dp.mu.Lock()
	vb, ok := dp.vols[key]
	if !ok {
		vb = &volumeBar{}
		vb.bar = dp.p.New(0, mpb.NopStyle(),
			mpb.PrependDecorators(decor.Name("  "+key, decor.WC{C: decor.DindentRight | decor.DextraSpace})),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
				vb.mu.Lock()
				defer vb.mu.Unlock()
				state := ""
				if vb.done {
					state = ", done"
				}
				return fmt.Sprintf("%d files, %s%s", vb.files, humanBytes(vb.bytes), state)
			})),
		)
		dp.vols[key] = vb
	}
	dp.mu.Unlock()
	vb.mu.Lock()
	vb.bytes, vb.files, vb.done = p.Bytes, p.Files, done
	vb.mu.Unlock()
	vb.bar.SetTotal(p.Bytes+1, false)
	vb.bar.SetCurrent(p.Bytes)
	if done {
		vb.bar.SetTotal(-1, true)
	}
}
