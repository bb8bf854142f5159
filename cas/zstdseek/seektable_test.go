package zstdseek

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/membuf/membuf/cas/internal/testblob"
)

// seekableFile compresses data as the store keeps it: frames of frame
// bytes each, then the seek table.
func seekableFile(t testing.TB, p *Pool, data []byte, frame int) []byte {
	t.Helper()
	var out []byte
	var b seekTableBuilder
	for off := 0; off < len(data); off += frame {
		chunk := data[off:min(off+frame, len(data))]
		frame, err := p.EncodeFrame(context.Background(), chunk, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, frame.Bytes()...)
		b.add(frame.Len(), len(chunk))
		frame.Free()
	}
	return b.appendTo(out)
}

func TestSeekTableRoundTrip(t *testing.T) {
	p := newTestZstdPool(t, 16<<20)
	data := testblob.Text(3*FrameSize+1000, 7)
	file := seekableFile(t, p, data, FrameSize)
	st, err := ReadSeekTable(bytes.NewReader(file), int64(len(file)), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if st.n != 4 || st.size != int64(len(data)) {
		t.Fatalf("%d frames of %d bytes, want 4 of %d", st.n, st.size, len(data))
	}
	for _, off := range []int64{0, 1, FrameSize - 1, FrameSize, 2*FrameSize + 5, 3 * FrameSize, int64(len(data)) - 1, int64(len(data))} {
		i, dstart, cstart := st.FrameAt(off)
		want, wantStart := int(off/FrameSize), off/FrameSize*FrameSize
		if off == st.size {
			want, wantStart = st.n, st.size
		}
		if i != want || dstart != wantStart {
			t.Fatalf("frameAt(%d) = frame %d at %d, want frame %d at %d", off, i, dstart, want, wantStart)
		}
		if i == st.n {
			if cstart != st.dataSize {
				t.Fatalf("frameAt(end) compressed offset %d, want %d", cstart, st.dataSize)
			}
			continue
		}
		cs, ds := st.Entry(i)
		got, err := p.DecodeFrame(context.Background(), file[cstart:cstart+cs], make([]byte, 0, ds))
		if err != nil || !bytes.Equal(got, data[dstart:dstart+ds]) {
			t.Fatalf("frame %d at compressed offset %d: %v", i, cstart, err)
		}
	}
	// The file is one zstd stream: the frames and a skippable frame.
	whole, err := p.DecodeFrame(context.Background(), file, make([]byte, 0, len(data)))
	if err != nil || !bytes.Equal(whole, data) {
		t.Fatalf("decoding the whole file as one stream: %v", err)
	}
}

func TestSeekTableRejects(t *testing.T) {
	p := newTestZstdPool(t, 16<<20)
	data := testblob.Text(2*FrameSize, 8)
	good := seekableFile(t, p, data, FrameSize)
	size := int64(len(data))
	tableAt := len(good) - (seekTableFixed + 2*seekEntrySize)
	entry := tableAt + seekHeaderSize
	footer := len(good) - seekFooterSize
	cases := map[string]struct {
		edit func(f []byte) []byte
		size int64
	}{
		"wrong footer magic": {func(f []byte) []byte { f[len(f)-1] ^= 1; return f }, size},
		"reserved bits":      {func(f []byte) []byte { f[footer+4] = 0x04; return f }, size},
		"frames past start":  {func(f []byte) []byte { binary.LittleEndian.PutUint32(f[footer:], 1<<20); return f }, size},
		"more frames than bytes": {func(f []byte) []byte {
			binary.LittleEndian.PutUint32(f[footer:], 3)
			return f
		}, 2},
		"wrong skippable magic": {func(f []byte) []byte { f[tableAt] ^= 1; return f }, size},
		"wrong frame size":      {func(f []byte) []byte { f[tableAt+4]++; return f }, size},
		"zero compressed size":  {func(f []byte) []byte { binary.LittleEndian.PutUint32(f[entry:], 0); return f }, size},
		"frame too large":       {func(f []byte) []byte { binary.LittleEndian.PutUint32(f[entry+4:], MaxFrame+1); return f }, size},
		"sizes miss the data": {func(f []byte) []byte {
			binary.LittleEndian.PutUint32(f[entry:], binary.LittleEndian.Uint32(f[entry:])+1)
			return f
		}, size},
		"sizes miss the blob":      {func(f []byte) []byte { return f }, size + 1},
		"too short":                {func(f []byte) []byte { return f[len(f)-seekTableFixed+1:] }, size},
		"no table":                 {func(f []byte) []byte { return f[:tableAt] }, size},
		"checksums flag, no space": {func(f []byte) []byte { f[footer+4] = seekChecksumFlag; return f }, size},
	}
	for name, c := range cases {
		f := c.edit(bytes.Clone(good))
		if _, err := ReadSeekTable(bytes.NewReader(f), int64(len(f)), c.size); !errors.Is(err, ErrSeekTable) {
			t.Errorf("%s: err %v, want ErrSeekTable", name, err)
		}
	}
	if _, err := ReadSeekTable(bytes.NewReader(good), int64(len(good)), size); err != nil {
		t.Fatalf("the unedited file: %v", err)
	}
}

// FuzzSeekTable reads arbitrary files as compressed blobs: the seek table
// reader must refuse what is inconsistent without panicking or allocating
// more than the file's size, and a table it accepts must describe frames
// that lie inside the file, add up to the blob and write back byte for
// byte.
func FuzzSeekTable(f *testing.F) {
	p := newTestZstdPool(f, 16<<20)
	for _, n := range []int{1, 100, FrameSize + 1} {
		data := testblob.Text(n, byte(n))
		f.Add(seekableFile(f, p, data, FrameSize), int64(n))
	}
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, file []byte, size int64) {
		st, err := ReadSeekTable(bytes.NewReader(file), int64(len(file)), size)
		if err != nil {
			return
		}
		if st.size != size || st.dataSize > int64(len(file)) || st.n > len(file) {
			t.Fatalf("accepted a table of %d frames, %d bytes from %d compressed, for a %d-byte file of a %d-byte blob", st.n, st.size, st.dataSize, len(file), size)
		}
		var sum, csum int64
		for i := range st.n {
			cs, ds := st.Entry(i)
			if cs <= 0 || ds <= 0 || ds > MaxFrame {
				t.Fatalf("frame %d: sizes %d and %d accepted", i, cs, ds)
			}
			if j, dstart, cstart := st.FrameAt(sum); j != i || dstart != sum || cstart != csum {
				t.Fatalf("frameAt(%d) = %d, %d, %d; want %d, %d, %d", sum, j, dstart, cstart, i, sum, csum)
			}
			sum += ds
			csum += cs
		}
		if st.stride == seekEntrySize {
			b := seekTableBuilder{raw: st.raw[:st.n*seekEntrySize]}
			if tail := b.appendTo(nil); !bytes.Equal(tail, file[st.dataSize:]) {
				t.Fatalf("the table does not write back as read")
			}
		}
		// Frames that decode must decode to their declared sizes, within
		// their buffers.
		for i, cstart := 0, int64(0); i < st.n; i++ {
			cs, ds := st.Entry(i)
			out, err := p.DecodeFrame(context.Background(), file[cstart:cstart+cs], make([]byte, 0, ds))
			if err == nil && int64(len(out)) > ds {
				t.Fatalf("frame %d decoded to %d bytes in a buffer of %d", i, len(out), ds)
			}
			cstart += cs
		}
	})
}
