package apierr_test

import (
	"errors"
	"fmt"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
)

func ExampleFromConnect() {
	// What the server sends for the story's late write...
	wire := apierr.ToConnect(&fence.StaleTokenError{Resource: "stock", Token: 1, LastAccepted: 2})
	fmt.Println(wire.Code(), wire.Message())

	// ...and what the client gets back.
	err := apierr.FromConnect(wire)
	var stale *fence.StaleTokenError
	if errors.Is(err, fence.ErrStaleToken) && errors.As(err, &stale) {
		fmt.Println("refused:", stale.Token, "<", stale.LastAccepted)
	}
	// Output:
	// failed_precondition token 1 is older than accepted token 2
	// refused: 1 < 2
}
