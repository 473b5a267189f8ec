"""with_example_ids: a DataLoader's batches with each example's index in the dataset, for
FilAccountant.step(inputs, targets, ids) in a loop the user keeps (docs/pytorch.md)."""
import torch


class _Indexed(torch.utils.data.Dataset):
    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        return self.dataset[index], index


def with_example_ids(data_loader):
    """A DataLoader over the same dataset, sampler (or batch sampler), collate function and workers
    as data_loader, whose batches are the original ones plus a last element, the examples' indices
    in the dataset (a LongTensor): `for x, y, ids in with_example_ids(loader)`."""
    if not isinstance(data_loader, torch.utils.data.DataLoader):
        raise ValueError(f"data_loader: expected a torch.utils.data.DataLoader, got {type(data_loader).__name__}")
    if isinstance(data_loader.dataset, torch.utils.data.IterableDataset):
        raise ValueError("data_loader: an IterableDataset has no example indices; give each example an id in the "
                         "dataset itself")
    collate = data_loader.collate_fn

    def collate_with_ids(items):
        batch = collate([item for item, _ in items])
        ids = torch.tensor([index for _, index in items], dtype=torch.long)
        return (*batch, ids) if isinstance(batch, (tuple, list)) else (batch, ids)

    return torch.utils.data.DataLoader(_Indexed(data_loader.dataset), batch_sampler=data_loader.batch_sampler,
                                       collate_fn=collate_with_ids, num_workers=data_loader.num_workers,
                                       pin_memory=data_loader.pin_memory, timeout=data_loader.timeout,
                                       worker_init_fn=data_loader.worker_init_fn,
                                       persistent_workers=data_loader.persistent_workers)
