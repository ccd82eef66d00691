// Package gcstest is a fake of the Cloud Storage JSON API, as much of it
// as the real storage client uses to keep gpulayer's state: object reads
// (metadata and media), single-request uploads and deletes, with the
// generation preconditions that make them compare-and-swap, and Google's
// error JSON. Tests run the real client against it on loopback.
package gcstest

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Server is a running fake.
type Server struct {
	URL string

	srv *httptest.Server
	mu  sync.Mutex
	gen int64
	obj map[string]object // "bucket/name"
	// Requests counts the requests served, by method.
	Requests map[string]int
	// BeforeWrite, when set, runs before an upload is applied (under no
	// lock): tests use it to let another writer in between.
	BeforeWrite func(name string)
}

type object struct {
	data       []byte
	generation int64
}

// Start runs a fake until the test ends.
func Start(t testing.TB) *Server {
	s := &Server{obj: map[string]object{}, Requests: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Object returns an object's data and generation; ok is false when there
// is none.
func (s *Server) Object(bucket, name string) (data []byte, generation int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.obj[bucket+"/"+name]
	return o.data, o.generation, ok
}

// Put sets an object, as another writer would.
func (s *Server) Put(bucket, name string, data []byte) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.obj[bucket+"/"+name] = object{data: append([]byte(nil), data...), generation: s.gen}
	return s.gen
}

// Delete removes an object, as another client would.
func (s *Server) Delete(bucket, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.obj, bucket+"/"+name)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.Requests[r.Method]++
	s.mu.Unlock()
	path := r.URL.EscapedPath()
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/upload/storage/v1/b/"):
		bucket, _, _ := strings.Cut(strings.TrimPrefix(path, "/upload/storage/v1/b/"), "/")
		s.upload(w, r, unescape(bucket))
	case strings.HasPrefix(path, "/storage/v1/b/"):
		rest := strings.TrimPrefix(path, "/storage/v1/b/")
		bucket, objPath, ok := strings.Cut(rest, "/o/")
		if !ok {
			fail(w, http.StatusNotImplemented, "not faked: "+r.Method+" "+path)
			return
		}
		s.object(w, r, unescape(bucket), unescape(objPath))
	default:
		fail(w, http.StatusNotImplemented, "not faked: "+r.Method+" "+path)
	}
}

func unescape(s string) string {
	u, err := url.PathUnescape(s)
	if err != nil {
		return s
	}
	return u
}

// precondition checks ifGenerationMatch against the object's generation
// (0: the object must not exist).
func precondition(r *http.Request, o object, exists bool) bool {
	v := r.URL.Query().Get("ifGenerationMatch")
	if v == "" {
		return true
	}
	want, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false
	}
	if want == 0 {
		return !exists
	}
	return exists && o.generation == want
}

func (s *Server) object(w http.ResponseWriter, r *http.Request, bucket, name string) {
	key := bucket + "/" + name
	s.mu.Lock()
	o, exists := s.obj[key]
	s.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		if !exists {
			fail(w, http.StatusNotFound, "No such object: "+key)
			return
		}
		if r.URL.Query().Get("alt") == "media" {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("X-Goog-Generation", strconv.FormatInt(o.generation, 10))
			w.Header().Set("X-Goog-Metageneration", "1")
			w.Header().Set("X-Goog-Hash", "crc32c="+crc(o.data))
			w.Header().Set("Content-Length", strconv.Itoa(len(o.data)))
			w.Write(o.data)
			return
		}
		writeObject(w, bucket, name, o)
	case http.MethodDelete:
		s.mu.Lock()
		defer s.mu.Unlock()
		o, exists = s.obj[key]
		if !exists {
			fail(w, http.StatusNotFound, "No such object: "+key)
			return
		}
		if !precondition(r, o, exists) {
			fail(w, http.StatusPreconditionFailed, "conditionNotMet")
			return
		}
		delete(s.obj, key)
		w.WriteHeader(http.StatusNoContent)
	default:
		fail(w, http.StatusNotImplemented, "not faked: "+r.Method)
	}
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, bucket string) {
	if t := r.URL.Query().Get("uploadType"); t != "multipart" {
		fail(w, http.StatusNotImplemented, "not faked: uploadType "+t)
		return
	}
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		fail(w, http.StatusBadRequest, "want a multipart upload")
		return
	}
	mr := multipart.NewReader(io.LimitReader(r.Body, 1<<30), params["boundary"])
	var meta struct {
		Name string `json:"name"`
	}
	part, err := mr.NextPart()
	if err != nil || json.NewDecoder(part).Decode(&meta) != nil {
		fail(w, http.StatusBadRequest, "bad metadata part")
		return
	}
	part, err = mr.NextPart()
	if err != nil {
		fail(w, http.StatusBadRequest, "no media part")
		return
	}
	data, err := io.ReadAll(part)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	name := meta.Name
	if name == "" {
		name = r.URL.Query().Get("name")
	}
	if s.BeforeWrite != nil {
		s.BeforeWrite(name)
	}
	key := bucket + "/" + name
	s.mu.Lock()
	defer s.mu.Unlock()
	o, exists := s.obj[key]
	if !precondition(r, o, exists) {
		fail(w, http.StatusPreconditionFailed, "conditionNotMet")
		return
	}
	s.gen++
	o = object{data: data, generation: s.gen}
	s.obj[key] = o
	writeObject(w, bucket, name, o)
}

func writeObject(w http.ResponseWriter, bucket, name string, o object) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{
		"kind": "storage#object", "bucket": bucket, "name": name,
		"generation": strconv.FormatInt(o.generation, 10), "metageneration": "1",
		"size": strconv.Itoa(len(o.data)), "contentType": "application/json",
		"crc32c": crc(o.data),
	})
}

// fail writes Google's error JSON.
func fail(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"error":{"code":%d,"message":%q,"errors":[{"message":%q,"reason":%q}]}}`, code, msg, msg, http.StatusText(code))
}

// crc is the object's CRC32C as the API writes it: base64 of the
// big-endian checksum. The client checks it after every upload and read.
func crc(data []byte) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	return base64.StdEncoding.EncodeToString(b[:])
}
