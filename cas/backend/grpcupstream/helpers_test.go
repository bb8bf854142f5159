package grpcupstream_test

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/membuf/membuf/cas"
)

func digestOf(data []byte) cas.Digest {
	s := sha256.Sum256(data)
	return cas.Digest{Hash: hex.EncodeToString(s[:]), Size: int64(len(data))}
}

// pattern returns size bytes that differ for each seed.
func pattern(size int, seed byte) []byte {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7) ^ seed ^ byte(i>>8)
	}
	return data
}
