package azure

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/membuf/membuf/cas/backend/internal/objstore"
)

// Location says where the backend is: a storage account, a container in
// it, a key prefix inside that, and the account's blob service endpoint.
// ParseURL makes one from the --upstream URL.
type Location struct {
	// Account is the storage account's name.
	Account string
	// Container is the container's name.
	Container string
	// Prefix is prepended to every blob name; empty, or ending in "/".
	Prefix string
	// Endpoint is the account's blob service URL (http or https) when it
	// is not https://ACCOUNT.blob.core.windows.net, e.g.
	// http://127.0.0.1:10000/devstoreaccount1 for Azurite.
	Endpoint string
}

// URLParameters lists the query parameters ParseURL accepts, for help
// texts.
const URLParameters = "endpoint=URL (the account's blob service, default https://ACCOUNT.blob.core.windows.net; e.g. Azurite's http://127.0.0.1:10000/devstoreaccount1)"

const form = "azblob://ACCOUNT/CONTAINER[/PREFIX][?endpoint=URL]"

// ParseURL parses azblob://ACCOUNT/CONTAINER[/PREFIX][?endpoint=URL]. The
// account and container names follow Azure's rules, the prefix is UTF-8
// without empty segments, and endpoint, the only parameter, is an http or
// https URL with a host and no query; anything else is an error that says
// what was wrong. Credentials never go in the URL (a SAS token neither):
// they come from AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or
// DefaultAzureCredential's environment.
func ParseURL(raw string) (Location, error) {
	fail := func(format string, args ...any) (Location, error) {
		return Location{}, fmt.Errorf("azblob URL %q: %s (want %s)", objstore.ShowURL(raw), fmt.Sprintf(format, args...), form)
	}
	u, err := url.Parse(raw)
	if err != nil {
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err
		}
		return fail("%v", err)
	}
	if u.Scheme != "azblob" {
		return fail("the scheme must be azblob://")
	}
	if u.User != nil {
		return fail("credentials do not go in the URL; set AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN, or use DefaultAzureCredential's environment")
	}
	if u.Opaque != "" || u.Fragment != "" || u.Port() != "" {
		return fail("the host part is the storage account's name alone")
	}
	loc := Location{Account: u.Host}
	if err := checkAccount(loc.Account); err != nil {
		return fail("%v", err)
	}
	container, rest, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if container == "" {
		return fail("no container")
	}
	if err := checkContainer(container); err != nil {
		return fail("%v", err)
	}
	loc.Container = container
	if loc.Prefix, err = objstore.CheckPrefix(rest); err != nil {
		return fail("%v", err)
	}
	if loc.Endpoint, err = objstore.Endpoint(u.RawQuery, URLParameters+"; a SAS token goes in "+envSAS); err != nil {
		return fail("%v", err)
	}
	return loc, nil
}

// String formats loc as the URL ParseURL reads; it holds no secret.
func (loc Location) String() string {
	u := url.URL{Scheme: "azblob", Host: loc.Account, Path: "/" + loc.Container + "/" + loc.Prefix}
	if loc.Endpoint != "" {
		u.RawQuery = url.Values{"endpoint": {loc.Endpoint}}.Encode()
	}
	return u.String()
}

// serviceURL is the account's blob service endpoint.
func (loc Location) serviceURL() string {
	if loc.Endpoint != "" {
		return loc.Endpoint
	}
	return "https://" + loc.Account + ".blob.core.windows.net"
}

// checkAccount accepts Azure's storage account names: 3 to 24 lowercase
// letters and digits.
func checkAccount(a string) error {
	if len(a) < 3 || len(a) > 24 {
		return fmt.Errorf("storage account name %q must be 3 to 24 characters", objstore.Clip(a))
	}
	for i := 0; i < len(a); i++ {
		if c := a[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return fmt.Errorf("storage account name %q: %q at position %d (lowercase letters and digits only)", objstore.Clip(a), c, i)
		}
	}
	return nil
}

// checkContainer accepts Azure's container names: 3 to 63 lowercase
// letters, digits and hyphens, starting and ending with a letter or
// digit, no two hyphens in a row.
func checkContainer(c string) error {
	if len(c) < 3 || len(c) > 63 {
		return fmt.Errorf("container name %q must be 3 to 63 characters", objstore.Clip(c))
	}
	for i := 0; i < len(c); i++ {
		ch := c[i]
		alnum := 'a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9'
		if !alnum && (ch != '-' || i == 0 || i == len(c)-1 || c[i-1] == '-') {
			return fmt.Errorf("container name %q: %q at position %d (lowercase letters, digits, and single inner hyphens only)", objstore.Clip(c), ch, i)
		}
	}
	return nil
}
