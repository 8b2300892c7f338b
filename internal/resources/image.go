package resources

import (
	"fmt"
	"strings"

	"github.com/skygo/skygo/internal/fielderr"
)

// DockerPrefix marks an image_id that is a container image: the task runs
// inside that container on the VM or pod.
const DockerPrefix = "docker:"

// ImageID is the image_id field.
type ImageID struct {
	// ByRegion maps a region to an image; the "" key is the image for
	// whatever region is chosen (the plain string form, or a null key).
	ByRegion map[string]string
	// Docker is the container image given by the mapping's `docker` key,
	// stored without the docker: prefix; it runs on the region's VM image.
	Docker string
}

// Any is the image for any region ("" when images are per region).
func (im ImageID) Any() string { return im.ByRegion[""] }

// DockerImage is the container image to run the task in, without the
// docker: prefix, or "" when the task runs directly on the VM.
func (im ImageID) DockerImage() string {
	if im.Docker != "" {
		return im.Docker
	}
	if s := im.ByRegion[""]; strings.HasPrefix(s, DockerPrefix) {
		return strings.TrimPrefix(s, DockerPrefix)
	}
	return ""
}

func (im ImageID) copy() *ImageID {
	out := &ImageID{Docker: im.Docker}
	if im.ByRegion != nil {
		out.ByRegion = make(map[string]string, len(im.ByRegion))
		for k, v := range im.ByRegion {
			out.ByRegion[k] = v
		}
	}
	return out
}

// toValue is the plain string when one image serves every region, else
// the mapping (the any-region image under the "" key).
func (im ImageID) toValue() any {
	if im.Docker == "" && len(im.ByRegion) == 1 {
		if s, ok := im.ByRegion[""]; ok {
			return s
		}
	}
	m := make(map[string]any, len(im.ByRegion)+1)
	for k, v := range im.ByRegion {
		m[k] = v
	}
	if im.Docker != "" {
		m["docker"] = im.Docker
	}
	return m
}

func (im ImageID) String() string {
	if v, ok := im.toValue().(string); ok {
		return v
	}
	var parts []string
	for _, k := range sortedKeys(im.ByRegion) {
		key := k
		if key == "" {
			key = "*"
		}
		parts = append(parts, key+"="+im.ByRegion[k])
	}
	if im.Docker != "" {
		parts = append(parts, "docker="+im.Docker)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// parseImageID reads a string or a mapping region -> image (with an
// optional docker key). An empty mapping is no image.
func parseImageID(v any, path string) (*ImageID, error) {
	if s, ok := v.(string); ok {
		s = strings.TrimSpace(s)
		if s == "" || s == DockerPrefix {
			return nil, fielderr.New(path, "image_id must not be empty")
		}
		return &ImageID{ByRegion: map[string]string{"": s}}, nil
	}
	m, ok := asMap(v)
	if !ok {
		return nil, fielderr.New(path, fmt.Sprintf("image_id must be an image string (e.g. docker:ubuntu:22.04 or ami-...) or a mapping region -> image; got %s", kindOf(v)))
	}
	if len(m) == 0 {
		return nil, nil
	}
	im := &ImageID{}
	dockerValues := false
	for _, k := range sortedKeys(m) {
		p := join(path, k)
		s, err := getString(m[k], p)
		if err != nil {
			return nil, err
		}
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, fielderr.New(p, "image must not be empty")
		}
		if k == "docker" {
			im.Docker = strings.TrimPrefix(s, DockerPrefix)
			continue
		}
		if strings.HasPrefix(s, DockerPrefix) {
			dockerValues = true
		}
		if im.ByRegion == nil {
			im.ByRegion = map[string]string{}
		}
		im.ByRegion[k] = s
	}
	if im.Docker != "" && dockerValues {
		return nil, fielderr.New(join(path, "docker"), "image_id has both a docker key and docker:-prefixed region images; give the container image once, under docker")
	}
	return im, nil
}
