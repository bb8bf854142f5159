module github.com/membuf/membuf

go 1.25.0
