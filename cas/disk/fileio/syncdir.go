package fileio

import "os"

// SyncDir makes the entries of directory dir durable: the names created,
// renamed or removed in it survive a crash of the machine once it returns.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
