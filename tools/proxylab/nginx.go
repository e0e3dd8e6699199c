package proxylab

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// NginxPath is where Debian's nginx package installs the server.
const NginxPath = "/usr/sbin/nginx"

// StartNginx runs nginx as a reverse proxy equivalent to the others: one
// process (master_process off: its CPU is one process's), round robin
// over backends with keep-alive connections to them (64 per worker),
// HTTP/1.1 upstream, no access log, on a free loopback port. It needs
// Debian's nginx (apt-get install -y nginx; the bench script does it).
func StartNginx(ctx context.Context, backends []string) (*Proc, error) {
	if _, err := os.Stat(NginxPath); err != nil {
		return nil, fmt.Errorf("proxylab: nginx is not installed (apt-get install -y nginx): %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	dir, err := os.MkdirTemp("", "proxylab-nginx-")
	if err != nil {
		return nil, err
	}
	var ups strings.Builder
	for _, b := range backends {
		fmt.Fprintf(&ups, "    server %s;\n", b)
	}
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log stderr warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream backends {
%[2]s    keepalive 64;
  }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://backends;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }
  }
}
`, dir, ups.String(), addr)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, NginxPath, "-c", path, "-p", dir)
	p, _, err := startProc(cmd)
	if err != nil {
		return nil, err
	}
	p.Addr = addr
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return p, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.Kill()
	return nil, fmt.Errorf("proxylab: nginx did not listen on %s: %s", addr, p.Stderr())
}
