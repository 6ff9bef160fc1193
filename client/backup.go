package client

import (
	"context"
	"net/http"

	"github.com/hourglass-mq/hourglass/api"
)

// Backup asks the broker for an online backup into dir, an absolute path
// on the broker's machine inside its --backup-dir that does not exist yet
// (POST /v1/admin/backup). It returns when the backup is complete and
// synced.
func (c *Client) Backup(ctx context.Context, dir string) (api.BackupResult, error) {
	var out api.BackupResult
	err := c.do(ctx, http.MethodPost, "/v1/admin/backup", api.BackupRequest{Dir: dir}, &out)
	return out, err
}
