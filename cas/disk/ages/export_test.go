package ages

// SamplesForTest is how many samples c keeps.
func SamplesForTest(c *Clock) int { return len(c.samples) }
