package disk

import (
	"context"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// A blob written through NewUnnamedWriter is named only at Commit (its
// pack record reserved under a placeholder): after a restart the store
// finds it under its hash, packed or a file, and nothing under the
// placeholder. The contract itself is storagetest's (TestStorageConformance).
func TestUnnamedBlobSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []StoreOption
		size int
	}{
		{"packed", nil, 10 << 10},
		{"file", []StoreOption{WithPacks(0)}, 300 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := OpenStore(dir, 0, nil, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			data := testblob.Text(tc.size, 1)
			w, err := s.NewWriter(ctx, cas.Digest{Size: int64(len(data))}, cas.Uncompressed)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := w.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			s.Close()
			if s, err = OpenStore(dir, 0, nil, tc.opts...); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got, err := cas.ReadAll(ctx, s, cas.DigestOf(data)); err != nil || string(got) != string(data) {
				t.Fatalf("ReadAll after a restart: %d bytes, %v", len(got), err)
			}
			if st := s.Stats(); st.Blobs != 1 {
				t.Fatalf("%d blobs after a restart, want 1", st.Blobs)
			}
			if _, err := cas.Resolve(ctx, s, placeholderHashes[cas.SHA256]); err == nil {
				t.Fatal("the placeholder names a blob")
			}
		})
	}
}
