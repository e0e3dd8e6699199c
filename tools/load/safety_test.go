package load

import "testing"

func TestCheckTarget(t *testing.T) {
	tests := []struct {
		url   string
		allow []string
		ok    bool
	}{
		{"http://127.0.0.1:8080/x", nil, true},
		{"http://127.9.9.9/", nil, true},
		{"http://[::1]:80/", nil, true},
		{"http://localhost:8080/", nil, true},
		{"https://LOCALHOST/", nil, true},
		{"http://10.0.0.1/", nil, false},
		{"http://example.com/", nil, false},
		{"http://example.com/", []string{"example.com"}, true},
		{"http://example.com/", []string{"example.org"}, false},
		{"http://localhost.example.com/", nil, false},
		{"http://127.0.0.1.nip.io/", nil, false},
		{"ftp://127.0.0.1/", nil, false},
		{"127.0.0.1:8080", nil, false},
		{"http:///path", nil, false},
	}
	for _, tt := range tests {
		err := CheckTarget(tt.url, tt.allow)
		if (err == nil) != tt.ok {
			t.Errorf("CheckTarget(%q, %v) = %v, want ok %v", tt.url, tt.allow, err, tt.ok)
		}
	}
}
