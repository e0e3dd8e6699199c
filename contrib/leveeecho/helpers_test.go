package leveeecho_test

import "net/http"

type httpFunc func(http.ResponseWriter, *http.Request)

func (f httpFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) { f(w, r) }
