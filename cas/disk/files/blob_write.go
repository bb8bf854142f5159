package files

import (
	"net"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/zstdseek"
)

// WriteBlob writes data, the bytes of blob d in pieces, complete and
// checked, to f: compressed by z if not nil (which it frees) and the first
// frame shows the blob compresses, else plain with one writev. It returns
// the blob as written, for the store to commit; on error f is the
// caller's to discard.
func WriteBlob(f vfs.File, d cas.Digest, data net.Buffers, z *zstdseek.FrameCompressor) (Written, error) {
	w := Written{Digest: d, Stored: d.Size}
	if z == nil {
		_, err := vfs.WriteBuffers(f, data)
		w.Sums = integrity.SumsOf(data)
		return w, err
	}
	defer z.Free()
	sf := integrity.SummingFile{F: f, Sums: integrity.NewSums(d.Size)}
	var err error
	for _, p := range data {
		if err = z.Write(sf, p); err != nil {
			break
		}
	}
	if err == nil {
		var stored int64
		w.Zstd, stored, err = z.Finish(sf)
		if w.Zstd {
			w.Stored = stored
		}
	}
	w.Sums = sf.Sums.Finish()
	return w, err
}
