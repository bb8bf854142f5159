package azure

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
)

// CreateContainer creates container name in account at endpoint (an
// Azurite's), signed with the account's key, for the tests' setup.
func CreateContainer(ctx context.Context, endpoint, account, key, name string) error {
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		return err
	}
	c := &client{http: http.DefaultClient, containerURL: endpoint + "/" + name, key: &sharedKey{account: account, key: k}}
	res, err := c.do(ctx, request{method: http.MethodPut, query: url.Values{"restype": {"container"}}, body: []byte{}}, http.StatusCreated)
	if err != nil {
		return err
	}
	return res.Body.Close()
}
