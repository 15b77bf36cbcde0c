package storage_test

import (
	"testing"

	"gostream/storage"
	"gostream/storage/logtest"
)

func TestLogSuite(t *testing.T) {
	logtest.Run(t, func(t *testing.T) logtest.Log {
		l, err := storage.Open(t.TempDir(), storage.Options{
			SegmentBytes:       4 << 10, // small, so that the suite crosses segments
			IndexIntervalBytes: 512,
			MaxBatchBytes:      logtest.MaxBatchBytes,
			Logger:             testLogger(t),
		})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return l
	})
}

func TestMemLogSuite(t *testing.T) {
	logtest.Run(t, func(t *testing.T) logtest.Log {
		return storage.NewMemLog(logtest.MaxBatchBytes, nil)
	})
}
