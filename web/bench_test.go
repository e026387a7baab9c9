package web

import (
	"io"
	"net/http"
	"testing"

	"github.com/vmvault/vmvault/internal/auth"
)

// BenchmarkAPIPolling: clients polling the task list and listing restore
// points over real HTTP, as the console does (go test -bench APIPolling
// -cpu 2 ./web; SetParallelism(25) with 2 CPUs is 50 clients).
func BenchmarkAPIPolling(b *testing.B) {
	f := newFixture(b, nil)
	tok := "Bearer " + f.tokens[auth.RoleRestoreOnly]
	paths := []string{"/api/v1/tasks", "/api/v1/restore-points"}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.SetParallelism(25)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			req, _ := http.NewRequest("GET", f.http.URL+paths[i%2], nil)
			req.Header.Set("Authorization", tok)
			res, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				b.Errorf("status %d", res.StatusCode)
				return
			}
			i++
		}
	})
}
