package node

import (
	"context"

	"gostream/controller"
	"gostream/metadata"
	"gostream/transport"
)

func (h *rpcHandler) alterTopicConfig(req *transport.Request) transport.Reply {
	var r transport.AlterTopicConfigRequest
	return serveWith(req, &r, allowing(func() error {
		return h.allow(req, metadata.OpAlter, metadata.ResourceTopic, r.Name)
	}, h.controller), func(ctx context.Context, c *controller.Controller) (transport.Message, error) {
		t, err := c.AlterTopicConfig(ctx, &r)
		if err != nil {
			return nil, err
		}
		ti := h.topicInfo(t)
		return &ti, nil
	})
}
