package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// What one event stream holds in memory, whatever its client does: a page
// of recorded events (at most eventPage events, or as many as make
// eventPageBytes, and one more of at most eventChunk bytes), and one part
// of a larger event at a time (eventPart bytes). A client that stops
// reading costs its stream at most about 1.5 MiB of heap (beside the
// kernel's socket buffers) until StreamWriteTimeout drops it, however
// large the run's events are: a 12 MB answer is read from the database in
// parts as it is written, never held whole by a stream. The parts are
// larger than the chunk because SQLite reads a whole value to cut a part
// of it: 1 MiB parts read a 12 MB event 12 times, not 190. A stream's page is read and its database connection
// let go before it writes, so that a stream holds no connection of the
// database while it waits for its client.
const (
	eventPage      = 256
	eventPageBytes = 256 << 10
	eventChunk     = 64 << 10
	eventPart      = 1 << 20
	// eventTail is how much of a large event's end is read with its page,
	// to tell whether it ends the run (see storedEvent.terminal).
	eventTail = 4 << 10
)

// maxResultBytes bounds the answer a RUN_FINISHED carries as its result,
// which AG-UI makes optional: the answer is the run's text messages
// already, and a longer one is sent there only, not twice.
const maxResultBytes = 64 << 10

// storedEvent is a recorded event as a stream reads it: whole if it is
// at most eventChunk bytes, else its first chunk and its size.
type storedEvent struct {
	seq  int64
	size int
	// data is the whole event, or its first eventChunk bytes.
	data []byte
	// terminal is whether the event is RUN_FINISHED or RUN_ERROR, after
	// which the stream ends.
	terminal bool
}

// terminalMarks are how a terminal event's type reads in its JSON. An
// event larger than a chunk is told terminal by its first chunk or its
// last eventTail bytes: its type is a short field written before or after
// its long ones (encoding/json writes a map's keys in order, and "type"
// comes after "delta", "message", "outcome" and "result"), and every long
// field of an event is a JSON string, in which these marks cannot appear
// unescaped.
var terminalMarks = [][]byte{[]byte(`"type":"RUN_FINISHED"`), []byte(`"type":"RUN_ERROR"`)}

func hasTerminalMark(b []byte) bool {
	for _, m := range terminalMarks {
		if bytes.Contains(b, m) {
			return true
		}
	}
	return false
}

func (b sqlBackend) eventsAfter(ctx context.Context, run string, live *liveRun, after int64, yield func(storedEvent) bool) error {
	if live != nil {
		// A run in flight, or one that just ended (its terminal event
		// is read here, not from the database, by the streams it woke):
		// its last events are in memory.
		if recent, ok := live.since(after); ok {
			for _, e := range recent {
				if !yield(e) {
					return nil
				}
			}
			return nil
		}
	}
	for {
		page := make([]storedEvent, 0, 16)
		rows, err := b.h.db.QueryContext(ctx, `SELECT seq, length(data),
			CASE WHEN length(data) <= ?1 THEN data ELSE substr(data, 1, ?1) END,
			CASE WHEN length(data) > ?1 THEN substr(data, -?2) END
			FROM serve_events WHERE run_id = ?3 AND seq > ?4 ORDER BY seq LIMIT ?5`, eventChunk, eventTail, run, after, eventPage)
		if err != nil {
			return err
		}
		full, size := false, 0
		for rows.Next() {
			var e storedEvent
			var tail []byte
			if err := rows.Scan(&e.seq, &e.size, &e.data, &tail); err != nil {
				rows.Close()
				return err
			}
			if e.size <= eventChunk {
				var t struct{ Type string }
				if json.Unmarshal(e.data, &t) == nil {
					e.terminal = t.Type == "RUN_FINISHED" || t.Type == "RUN_ERROR"
				}
			} else {
				e.terminal = hasTerminalMark(e.data) || hasTerminalMark(tail)
			}
			page = append(page, e)
			if size += len(e.data); size >= eventPageBytes || len(page) == eventPage {
				full = true
				break
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return err
		}
		for _, e := range page {
			if !yield(e) {
				return nil
			}
			after = e.seq
		}
		if !full {
			return nil
		}
	}
}

func (b sqlBackend) eventPart(ctx context.Context, run string, seq int64, off, n int) ([]byte, error) {
	var part []byte
	err := b.h.db.QueryRowContext(ctx, `SELECT substr(data, ?, ?) FROM serve_events WHERE run_id = ? AND seq = ?`, off+1, n, run, seq).Scan(&part)
	return part, err
}

// errEventChanged is the error of a large event whose bytes changed while
// a stream wrote it, which a recorded event never does.
var errEventChanged = errors.New("serve: a recorded event changed while it was sent")

// stream writes the events of run id after the one numbered after, as
// server-sent events whose ids are their numbers, until the run's last.
// The run goes on if the client goes away. Each write must be taken by the
// client within Config.StreamWriteTimeout: a client that stops reading is
// dropped, and reconnects with Last-Event-ID, rather than hold the stream
// for ever. While the stream waits for the run's next event it has no
// deadline. An event larger than eventChunk is written a chunk at a time,
// each read from the database as the one before it has been taken.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, id string, after int64) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	// The deadline is the real clock's, whatever Config.Now says: it is
	// the connection's. A writer without deadlines (a test's recorder) has
	// none.
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(h.cfg.StreamWriteTimeout)) }
	deadline()
	// Without a server-wide WriteTimeout, net/http leaves a handler's
	// deadline on a kept-alive connection: the next request's would have it.
	defer rc.SetWriteDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		deadline()
		_, err := w.Write(b)
		return err == nil
	}
	var head []byte
	var live *liveRun // the run as last seen in flight: its recent events outlast it
	for {
		var next <-chan struct{}
		if lr := h.be.follow(id); lr != nil {
			live, next = lr, lr.wait()
		}
		done, failed := false, false
		err := h.be.eventsAfter(r.Context(), id, live, after, func(e storedEvent) bool {
			if e.seq != after+1 {
				// Events numbered one by one, and a number missing: an
				// event that could not be recorded. The stream ends
				// before it rather than send what follows it.
				done = true
				return false
			}
			head = fmt.Appendf(head[:0], "id: %d\ndata: ", e.seq)
			if e.size == len(e.data) {
				// A whole event is one write: at most eventChunk bytes
				// and its framing.
				head = append(append(head, e.data...), "\n\n"...)
				if !write(head) {
					failed = true
					return false
				}
				after = e.seq
				done = e.terminal
				return !done
			}
			if !write(head) || !write(e.data) {
				failed = true
				return false
			}
			for off := len(e.data); off < e.size; {
				part, err := h.be.eventPart(r.Context(), id, e.seq, off, eventPart)
				if err == nil && len(part) == 0 {
					err = errEventChanged
				}
				if err != nil {
					if r.Context().Err() == nil {
						h.log.Error("serve: reading an event to send", "run", id, "seq", e.seq, "err", err)
					}
					failed = true
					return false
				}
				if !write(part) {
					failed = true
					return false
				}
				off += len(part)
			}
			if !write([]byte("\n\n")) {
				failed = true
				return false
			}
			after = e.seq
			done = e.terminal
			return !done
		})
		if err != nil || failed {
			return
		}
		deadline()
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return
		}
		if done || next == nil {
			return
		}
		// No deadline while the stream waits for the run: an HTTP/2
		// stream is reset when its deadline passes, written to or not, and
		// a run may be quiet for longer (a slow tool, a person's approval).
		_ = rc.SetWriteDeadline(time.Time{})
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
	}
}
