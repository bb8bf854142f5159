package backendtest_test

import (
	"testing"

	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
)

func TestMemory(t *testing.T) {
	var current *backendtest.Memory
	backendtest.Run(t, func(t *testing.T) tier.Backend {
		current = backendtest.NewMemory()
		return current
	}, backendtest.Options{
		KeepsChecksums: true,
		ResolvesHashes: true,
		Outage:         func(t *testing.T, down bool) { current.SetDown(down) },
	})
}

func TestMemoryBehindTheTier(t *testing.T) {
	current := backendtest.NewMemory()
	backendtest.RunTier(t, func(t *testing.T) tier.Backend { return current }, backendtest.Options{
		Outage: func(t *testing.T, down bool) { current.SetDown(down) },
	})
}
