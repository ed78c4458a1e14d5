package search

import (
	"os"
	"syscall"
	"unsafe"
)

const (
	adviceRandom   = syscall.MADV_RANDOM
	adviceWillNeed = syscall.MADV_WILLNEED
	adviceDontNeed = syscall.MADV_DONTNEED
)

var pageSize = uintptr(os.Getpagesize())

// advise applies advice to the pages b spans (madvise wants a page-aligned start). It is
// only advice: an error changes nothing the server relies on, so it is ignored.
func advise(b []byte, advice int) {
	if len(b) == 0 {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	back := int(uintptr(p) & (pageSize - 1)) // to the start of its page, inside the mapping
	_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, -back)), len(b)+back), advice)
}
