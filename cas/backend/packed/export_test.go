package packed

// NewMemBucket is the tests' in-memory Bucket, for packed_test.
func NewMemBucket() Bucket { return newMemBucket() }
