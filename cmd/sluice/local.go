package main

import (
	"context"
	"errors"
)

func runLocal(ctx context.Context, e env, args []string) error {
	return errors.New("not yet")
}
