//go:build unix

package volumetest

import (
	"os"
	"syscall"
)

func blocks(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Sys().(*syscall.Stat_t).Blocks, nil
}
