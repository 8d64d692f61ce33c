package desired

import (
	"context"
	"fmt"
)

// EditStatus overwrites the status column of k with text, as an operator
// editing the file by hand would (storetest.Backend.EditStatus).
func EditStatus(s *SQLite, k Key, text string) error {
	res, err := s.db.ExecContext(context.Background(), `UPDATE work_items SET status = ? WHERE key = ?`, text, k.String())
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("edit status of %s: %d rows, %v", k, n, err)
	}
	return nil
}
