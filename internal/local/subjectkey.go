package local

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/subjectkey"
)

// recordSubjectKey writes the subject-key record as a deployment does
// (sluice local is one), or rotates it from the key id from
// (--subject-key-from). On a Redis whose record names another key it does
// not start: its admin API would refuse every reset and refund, and the
// error names the ways out.
func recordSubjectKey(ctx context.Context, r *subjectkey.Record, from string) error {
	if from != "" {
		if err := r.Rotate(ctx, from); err != nil {
			return fmt.Errorf("%w: --subject-key-from: %v", ErrConfig, err)
		}
		return nil
	}
	_, err := r.Deploy(ctx)
	var me *subjectkey.MismatchError
	if errors.As(err, &me) {
		return fmt.Errorf("%w: %s records subject hash key id %s, and this sluice local's key (SUBJECT_HMAC_KEY, else the one kept in SLUICE_STATE_DIR) has id %s: "+
			"set SUBJECT_HMAC_KEY to the key that wrote it, or use another --redis-prefix, or record this one (every bucket starts full): "+
			"sluice local --subject-key-from %s; see %s", ErrConfig, me.Key, me.Recorded, me.Own, me.Recorded, subjectkey.Recovery)
	}
	if err != nil {
		return fmt.Errorf("record the subject hash key: %w", err)
	}
	return nil
}
