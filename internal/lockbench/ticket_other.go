//go:build !linux

package lockbench

import (
	"context"
	"errors"
)

// ticketLock, the reference FIFO lock, needs futex(2): Linux only.
type ticketLock struct{}

var errNoTicketLock = errors.New("the fifo reference lock needs futex(2), which only Linux has")

func resetTicketLock(string) error { return nil }

// openTicketLock succeeds, so that only a round under the lock fails.
func openTicketLock(string) (*ticketLock, error) { return &ticketLock{}, nil }

func (*ticketLock) lock(context.Context) (func() error, error) { return nil, errNoTicketLock }

func (*ticketLock) close() error { return nil }
