package memory_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/store/memory"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

var _ storetest.Store = (*memory.Store)(nil)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return memory.New() })
}
