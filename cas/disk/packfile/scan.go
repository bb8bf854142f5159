package packfile

import (
	"io"
	"io/fs"
	"slices"
)

// Segment is a segment's file as Scan reads it (an *os.File, a vfs.File).
type Segment interface {
	io.ReaderAt
	Stat() (fs.FileInfo, error)
}

// Record is a committed record found by Scan.
type Record struct {
	Header
	Off int64 // of its data in the file
}

// Scan reads the record headers of the file f of segment seq and
// returns its committed records, in order, and where the segment ends (past
// its last record of seq). With checkData, each committed record's data is
// read and its CRC checked, and a record whose data does not match is left
// out. Anything that is not a valid header (a torn write, a hole) is
// stepped over 64 bytes at a time; a record of another segment (the file's
// earlier life) is stepped over whole.
func Scan(f Segment, checkData bool, maxSize int64, seq uint64) ([]Record, int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	end := fi.Size()
	var used int64 // past the last record of seq
	var recs []Record
	var hb [LongHeaderLen]byte
	var data []byte
	for off := int64(0); off+HeaderLen <= end; {
		if _, err := f.ReadAt(hb[:HeaderLen], off); err != nil {
			return nil, 0, err
		}
		n := NeedLen(hb[:HeaderLen])
		if n == 0 || off+n > end {
			off += Align
			continue
		}
		if n > HeaderLen {
			if _, err := f.ReadAt(hb[HeaderLen:n], off+HeaderLen); err != nil {
				return nil, 0, err
			}
		}
		h, ok := DecodeHeader(hb[:n], maxSize)
		if !ok || off+n+h.Size > end {
			off += Align
			continue
		}
		recLen := RecordLen(int(h.HashLen), h.Size)
		if h.Seq != seq {
			off += recLen
			continue
		}
		used = min(off+recLen, end)
		if h.State == Committed {
			keep := true
			if checkData {
				data = slices.Grow(data[:0], int(h.Size))[:h.Size]
				if _, err := f.ReadAt(data, off+n); err != nil && err != io.EOF {
					return nil, 0, err
				}
				keep = Checksum(data) == h.DataCRC
			}
			if keep {
				recs = append(recs, Record{Header: h, Off: off + n})
			}
		}
		off += recLen
	}
	return recs, used, nil
}
